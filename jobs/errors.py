"""The error every part of a submission raises for input it refuses."""


class JobSubmissionError(Exception):
    """A submission refused before anything reached HTCondor. `field` names the input."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
