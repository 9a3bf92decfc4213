"""Entry log ``.log`` files: read (reference parser and jitted scanner) and write."""
