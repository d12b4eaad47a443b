"""Laptop-sized real models for tests and playgrounds (needs the ``offline`` extra)."""
