"""Pydantic models of every topic payload and HTTP body, their JSON codec and schema export. No business logic."""
