"""A changelist that never counts: every query it runs has a LIMIT.

Django's changelist asks ``paginator.count`` (a COUNT over the filtered table) on every page load,
and shows the unpaginated queryset whenever it holds one page or less. At a million rows the COUNT
alone costs more than the page. Here a page reads ``per_page + 1`` rows at its offset: the extra row
says whether there is a next page, and the "count" is only what has been seen so far.
"""

from __future__ import annotations

import math

from django.contrib import admin
from django.contrib.admin.views.main import PAGE_VAR, ChangeList
from django.core.paginator import Page, Paginator
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.urls import reverse

from artifacts_app import access

MAX_PAGE = 1_000_000


class SeenPaginator(Paginator):
    """A paginator over one fetched window: pages up to the current one, and the next if any."""

    def __init__(self, object_list: QuerySet[Model], per_page: int, *, page_num: int) -> None:
        super().__init__(object_list, per_page)
        # ``?p=`` is any integer the URL holds; past MAX_PAGE the OFFSET would overflow the
        # database's integer (a 500 on SQLite), so such a page is simply past the end.
        page_num = min(max(int(page_num), 1), MAX_PAGE)
        offset = (page_num - 1) * per_page
        self.window = list(object_list[offset : offset + per_page + 1])
        self.page_num = page_num
        self.has_next = len(self.window) > per_page
        self._seen = offset + len(self.window)

    @property
    def count(self) -> int:
        return self._seen

    @property
    def num_pages(self) -> int:
        return max(math.ceil(self._seen / self.per_page), 1)

    def page(self, number: int | str) -> Page:
        return Page(self.window[: self.per_page], self.page_num, self)


class UncountedChangeList(ChangeList):
    def get_results(self, request: HttpRequest) -> None:
        paginator = SeenPaginator(self.queryset, self.list_per_page, page_num=self.page_num)
        self.paginator = paginator
        self.result_count = paginator.count
        self.full_result_count = None
        self.show_full_result_count = False
        self.show_admin_actions = True
        self.can_show_all = False
        self.multi_page = paginator.has_next or paginator.page_num > 1
        self.result_list = paginator.page(paginator.page_num).object_list
        page = paginator.page_num
        self.newer_url = self.get_query_string({PAGE_VAR: page - 1}) if page > 1 else None
        self.older_url = self.get_query_string({PAGE_VAR: page + 1}) if paginator.has_next else None

    def url_for_result(self, result: Model) -> str:
        # The id itself, not Django's quoted form (display.RawIdMixin opens both).
        return reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_change",
            args=(getattr(result, self.pk_attname),),
            current_app=self.model_admin.admin_site.name,
        )


class UncountedAdmin(admin.ModelAdmin):
    """A ModelAdmin whose changelist is bounded, for tables that grow without limit."""

    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER  # facet counts are a COUNT per filter choice
    list_max_show_all = 0
    list_per_page = 50

    def get_changelist(self, request: HttpRequest, **kwargs: object) -> type[ChangeList]:
        return UncountedChangeList


class SupervisorMixin:
    """Staff are the supervisors (API.md): they see everything here and may delete artifacts,
    whatever their Django model permissions say. Nobody edits a row in place."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return access.is_staff(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return access.is_staff(request.user)

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False
