"""fsck passes, run in order; each owns its checks and the problem codes of its number."""
