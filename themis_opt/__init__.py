"""themis_opt."""
