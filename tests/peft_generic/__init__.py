"""PEFT's generic tuner tests (vendored from peft 0.21.2, Apache-2.0) and their local stand-ins."""
