"""Control-plane writes, one module per subject: organizations, people (accounts and passwords),
signup, members, invitations, namespaces and keys.

Services take keyword arguments, check the rules about who may do what (so every transport, REST,
gRPC or the operator CLI, gets the same ones), write in one transaction with their audit entry
(tenants/audit.py), and raise tenants.errors.
"""
