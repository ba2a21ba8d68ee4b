"""Per-run compliance exports: one signed, self-contained file per run, verifiable offline (issue 15).

`manifest` (the hash chain, the signature and the offline verifier) and `links` are pure and import
neither Django nor the database, so `perdura export verify` runs on an auditor's laptop with only the
package installed; `signing` finds the installation's key; `gather` reads a run through the engine's
read paths and writes the file.
"""
