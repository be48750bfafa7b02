"""The SQLite backend of this site: Django's, with a health check that notices a replaced file."""
