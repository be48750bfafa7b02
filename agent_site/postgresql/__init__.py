"""The PostgreSQL backend of this site: Django's, with every wait for the server bounded."""
