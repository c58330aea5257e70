"""The built-in agent loop: function tools, their JSON Schemas and their calls ("Built-in agent loop")."""
