"""The columns every dedup stage writes (a module of its own so plans and stages import it without
importing each other)."""

DUP_GROUP = "dup_group"  # id of the document the group keeps (a document with no duplicate: its own id)
DUP_KEEP = "dup_keep"  # whether this row survives
