"""The pure heart of om-stream: Observational Memory's rules as functions of values.

Imports only the standard library and pydantic. No asyncio, no clocks (time is an argument), no I/O of any kind.
"""
