"""The OpenSearch visibility backend: documents (template, documents), compiler (filters to query DSL), backend."""
