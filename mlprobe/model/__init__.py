"""The vocabulary and the types the stages hand each other (no I/O, no imports of other stages)."""
