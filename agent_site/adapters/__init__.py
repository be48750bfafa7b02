"""One module per library, for what its public interface does not offer (each lists its names)."""
