"""Measuring acceptance from live servers: Prometheus exposition, counter deltas, logs."""
