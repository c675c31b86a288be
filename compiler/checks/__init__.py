"""Whole-plan checks: passes that read a plan, report what they find, and return it unchanged."""
