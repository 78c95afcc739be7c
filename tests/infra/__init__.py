"""Checks of the Bicep deployment in infra/."""
