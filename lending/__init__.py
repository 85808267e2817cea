"""Workstation owners: who lends each workstation, on what terms, and asking it back."""
