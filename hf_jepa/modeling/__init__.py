"""One self-contained folder per JEPA family (torch + transformers only, so `trust_remote_code` export works)."""
