"""Argument checks every factory shares."""





def check_count(name: str, value, minimum: int, meaning: str = "") -> None:
    """A ValueError naming the argument unless `value` is an integer >= minimum."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}{meaning}, got {value!r}")
