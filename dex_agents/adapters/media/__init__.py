"""Media stores that keep image bytes in this process or on a local file system ("Images").

``InMemoryMediaStore`` keeps images in one process, for tests; ``LocalDirectoryMediaStore``
keeps them in a directory that a client and its Workers share on one machine. Both
follow the ``MediaStore`` contract and ask ``dex_agents.domain.images`` what is valid.
"""
