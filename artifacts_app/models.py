"""The tables: Agent · Session · Artifact · ArtifactVersion · Blob · Event · ApiKey.

Rows are written by ``services`` (and, inside a service's call, ``events``' event rows and ``blobs``'
claim of a Blob row); reads go through ``selectors``; the admin's changelists read their own rows.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Agent(models.Model):
    """One agent. Declared agents (settings) and freeform ones (admin, `create_agent`) share this row.

    ``artifact_count`` and ``last_seq`` are maintained under a row lock by every tag and delete, so
    that eviction and event numbering never need a COUNT or a MAX over the other tables.
    """

    slug = models.CharField(max_length=63, unique=True)
    module = models.CharField(
        max_length=255,
        blank=True,
        default="",
        help_text="Python module that declares its kinds; empty: freeform.",
    )
    max_artifacts = models.PositiveIntegerField(default=1000)
    keep_versions = models.PositiveIntegerField(
        default=10,
        db_default=10,
        help_text="Versions kept per record (freeform agents); 1 keeps no history.",
    )
    # Kinds declared over HTTP (API.md "Kinds declared over HTTP"): the declaration as stored, and
    # its hash, which names the compiled declaration in each process (registry.spec_for). The
    # hot reads load the hash only; ``kinds`` is read once per process and declaration.
    kinds = models.JSONField(null=True, blank=True, editable=False)
    kinds_hash = models.CharField(
        max_length=64, blank=True, default="", db_default="", editable=False
    )
    artifact_count = models.PositiveIntegerField(default=0, editable=False)
    last_seq = models.PositiveBigIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Session(models.Model):
    """One conversation of a user with an agent; ``sid`` is its public id, unique per agent."""

    # Indexed by the composite indexes and constraint below, which all start with the agent.
    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="sessions", db_index=False
    )
    sid = models.CharField("id", max_length=128)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="artifact_sessions",
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "sid"], name="session_agent_sid_uniq")
        ]
        indexes = [
            models.Index(fields=["agent", "-created_at", "-id"], name="session_agent_newest"),
            models.Index(
                fields=["agent", "owner", "-created_at", "-id"], name="session_agent_owner_newest"
            ),
        ]

    def __str__(self) -> str:
        return self.sid


class Blob(models.Model):
    """Content-addressed bytes in the ``artifacts`` storage, named by their sha256."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    size = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # The searchable words of its first ARTIFACTS_SEARCH_CONTENT_BYTES (API.md "Search"), kept
    # once a tag has stored it as text, so that a record keeping its content is indexed without
    # reading the bytes again. Null: never tagged as text (or not yet backfilled).
    words = models.TextField(null=True, blank=True, editable=False)

    def __str__(self) -> str:
        return self.sha256


class Artifact(models.Model):
    """One record. A keyed record's ``id`` is derived from (agent, key): the primary key is the upsert's
    unique constraint, so one key can never make two rows, whatever its length."""

    SOURCE_HOST = "host"
    SOURCE_MODEL = "model"
    SOURCES = [(SOURCE_HOST, "host"), (SOURCE_MODEL, "model")]

    id = models.CharField(primary_key=True, max_length=40)
    # Every index below starts with the agent; a separate FK index would only slow writes.
    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="artifacts", db_index=False
    )
    kind = models.CharField(max_length=64)
    key = models.TextField(null=True, blank=True)
    title = models.CharField(max_length=512, null=True, blank=True)
    data = models.JSONField()
    session = models.ForeignKey(
        Session,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="artifacts",
        db_index=False,
    )
    turn_id = models.CharField(max_length=128, null=True, blank=True)
    source = models.CharField(max_length=8, choices=SOURCES, default=SOURCE_HOST)
    blob = models.ForeignKey(
        Blob,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="artifacts",
        db_index=False,
    )
    content_type = models.CharField(max_length=255, null=True, blank=True)
    # The number of the current version (its row in ArtifactVersion); pinned records are never evicted.
    # Database defaults too: rows written by SQL that names neither (a bulk load) are version 1, unpinned.
    version = models.PositiveIntegerField(default=1, db_default=1)
    pinned = models.BooleanField(default=False, db_default=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # DESIGN.md §6: every list is a keyset page that starts with the agent and ends (updated_at, id).
        indexes = [
            models.Index(fields=["agent", "updated_at", "id"], name="artifact_agent_updated"),
            models.Index(
                fields=["agent", "kind", "updated_at", "id"], name="artifact_agent_kind_updated"
            ),
            # A session belongs to one agent, so this serves session lists and the session FK
            # (SET_NULL on delete) alike; a separate FK index would only slow every write.
            models.Index(fields=["session", "updated_at", "id"], name="artifact_session_updated"),
            # gc_blobs asks "does any record point at this blob?"; most records have no blob.
            models.Index(
                fields=["blob"], name="artifact_blob", condition=models.Q(blob__isnull=False)
            ),
            # Eviction takes the oldest-updated *unpinned* records: a seek here, however many of
            # the agent's oldest records are pinned.
            models.Index(
                fields=["agent", "updated_at", "id"],
                name="artifact_agent_unpinned",
                condition=models.Q(pinned=False),
            ),
            # The list across agents (API.md "Search": staff see every agent's records), and the
            # admin's home (what shipped) walks it.
            models.Index(fields=["updated_at", "id"], name="artifact_updated"),
        ]

    def __str__(self) -> str:
        return self.title or self.key or self.id


class ArtifactVersion(models.Model):
    """What one tag of a record stored (API.md "Versions, pins and diffs"). The record's newest
    version repeats its current fields, so reading a record never needs this table; a record keeps
    its newest ``keep_versions`` versions, and all of them go with it."""

    id = models.BigAutoField(primary_key=True)
    # Indexed by the (artifact, number) constraint below.
    artifact = models.ForeignKey(
        Artifact, on_delete=models.CASCADE, related_name="versions", db_index=False
    )
    number = models.PositiveIntegerField()
    kind = models.CharField(max_length=64)
    title = models.CharField(max_length=512, null=True, blank=True)
    data = models.JSONField()
    # Visibility is by the version's own session (a user sees the versions of sessions it owns).
    session = models.ForeignKey(
        Session,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="artifact_versions",
        db_index=False,
    )
    turn_id = models.CharField(max_length=128, null=True, blank=True)
    source = models.CharField(max_length=8, choices=Artifact.SOURCES, default=Artifact.SOURCE_HOST)
    blob = models.ForeignKey(
        Blob,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="versions",
        db_index=False,
    )
    content_type = models.CharField(max_length=255, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["artifact", "number"], name="version_artifact_number_uniq"
            )
        ]
        indexes = [
            # A deleted session nulls its versions' session (SET_NULL): without this, a scan.
            models.Index(
                fields=["session"],
                name="version_session",
                condition=models.Q(session__isnull=False),
            ),
            # gc_blobs keeps a blob any version points at.
            models.Index(
                fields=["blob"], name="version_blob", condition=models.Q(blob__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.artifact_id} v{self.number}"


class Event(models.Model):
    """A stored event, kept for ``?after=`` replay. ``payload`` is exactly the websocket message."""

    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=32)
    session_sid = models.CharField(max_length=128, null=True, blank=True)
    artifact_id = models.CharField(max_length=40)
    turn_id = models.CharField(max_length=128, null=True, blank=True)
    payload = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "seq"], name="event_agent_seq_uniq")
        ]
        indexes = [
            models.Index(fields=["agent", "session_sid", "seq"], name="event_agent_session_seq"),
            models.Index(fields=["created_at"], name="event_created"),
            # The agent dashboard's per-hour counts: one agent, one type, a time window.
            models.Index(fields=["agent", "type", "created_at"], name="event_agent_type_created"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}#{self.seq} {self.type}"


class ApiKey(models.Model):
    """An agent key or a user token. Only the sha256 of the secret is stored; ``prefix`` lets a
    person recognise a key in the admin without it being usable."""

    KIND_AGENT = "agent"
    KIND_USER = "user"
    KINDS = [(KIND_AGENT, "agent key"), (KIND_USER, "user token")]

    kind = models.CharField(max_length=8, choices=KINDS)
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="keys"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="artifact_tokens",
    )
    prefix = models.CharField(max_length=24)
    secret_hash = models.CharField(max_length=64, unique=True)
    label = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(kind="agent", agent__isnull=False, user__isnull=True)
                    | models.Q(kind="user", user__isnull=False, agent__isnull=True)
                ),
                name="apikey_owner_matches_kind",
            )
        ]

    def __str__(self) -> str:
        return f"{self.prefix}…"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Webhook(models.Model):
    """An HTTPS endpoint an agent's events are pushed to (API.md "Webhooks"); a cursor over the
    stored events (DESIGN.md §16: the event table is the outbox).

    ``cursor`` is the last seq done (delivered, or filtered out); the next selected event after it
    is the head, tried at ``next_attempt_at`` (``attempts`` tries so far, failing since
    ``failing_since``). A deliverer holds the row while it sends: ``lease_token`` until
    ``lease_until``. ``generation`` changes with every change made through the API (filters, url,
    secret, replay, active), so a deliverer that read the row before never writes over it.
    """

    public_id = models.CharField(max_length=40, unique=True)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="webhooks")
    url = models.CharField(max_length=2048)
    events = models.JSONField(default=list, blank=True)  # [] = every type
    kinds = models.JSONField(default=list, blank=True)  # [] = every kind
    description = models.CharField(max_length=500, blank=True, default="")
    # The signing key must be read to sign, so it is stored as given (never logged or shown again).
    secret = models.CharField(max_length=80, editable=False)
    active = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=500, blank=True, default="")
    cursor = models.PositiveBigIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    failing_since = models.DateTimeField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    lease_token = models.CharField(max_length=32, blank=True, default="", editable=False)
    generation = models.PositiveBigIntegerField(default=0, editable=False)
    # Replays: events up to ``replay_upto`` are sent again under ids of the ``replays``-th replay.
    replays = models.PositiveIntegerField(default=0, editable=False)
    replay_upto = models.PositiveBigIntegerField(default=0, editable=False)
    last_seq = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    last_status = models.PositiveIntegerField(null=True, blank=True, editable=False)
    last_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        indexes = [
            # The deliverers' claim: active webhooks due first.
            models.Index(fields=["active", "next_attempt_at"], name="webhook_due"),
        ]

    def __str__(self) -> str:
        return self.public_id


class WebhookDelivery(models.Model):
    """One attempt to deliver one event to one webhook (its log, newest first)."""

    webhook = models.ForeignKey(
        Webhook, on_delete=models.CASCADE, related_name="deliveries", db_index=False
    )
    seq = models.PositiveBigIntegerField()
    event_type = models.CharField(max_length=32)
    attempt = models.PositiveIntegerField()
    status = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True, default="")
    duration_ms = models.PositiveIntegerField(default=0)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["webhook", "-id"], name="webhook_delivery_newest"),
            models.Index(fields=["at"], name="webhook_delivery_at"),
        ]

    def __str__(self) -> str:
        return f"{self.webhook_id}#{self.seq} try {self.attempt}"


class Upload(models.Model):
    """A resumable upload (tus, API.md "Large contents"): its bytes arrive in pieces into a file
    beside the blob storage (or an S3 multipart upload); ``offset`` counts only bytes already
    durable. Finished, it is a blob (``sha256``) that one tag may use (``used_at``)."""

    id = models.CharField(primary_key=True, max_length=40)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    length = models.PositiveBigIntegerField()
    offset = models.PositiveBigIntegerField(default=0)
    metadata = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(db_index=True)
    # The PATCH writing it now ("host:pid:nonce") and until when that holds, if it is not ended.
    lease = models.CharField(max_length=200, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)
    # S3: the multipart upload, its parts ([number, etag, size]) and the bytes past the last part
    # kept in a tail object until they make a part.
    s3_upload_id = models.CharField(max_length=1024, blank=True, default="")
    parts = models.JSONField(default=list)
    tail = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True, default="", db_index=True)
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.id
