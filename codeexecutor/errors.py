"""Domain errors: each says what is wrong and how to fix it."""


class CodeExecutorError(Exception):
    """Base class of errors shown to the user as one line (exit code 2 in the CLI)."""


class UsageError(CodeExecutorError):
    """Bad input from the user: missing file, unreadable file, wrong option value."""


class ConfigError(CodeExecutorError):
    """A configuration file or value that fails validation; lists every problem found."""
