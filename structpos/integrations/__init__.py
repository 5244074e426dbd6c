"""Integrations with data-processing libraries (Hugging Face ``datasets``, Ray Data)."""
