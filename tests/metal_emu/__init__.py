"""The Metal emulator: see README.md."""
