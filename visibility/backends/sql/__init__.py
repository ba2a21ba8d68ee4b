"""The SQL visibility backend: records (the table and its writes), compiler (filters to SQL), backend."""
