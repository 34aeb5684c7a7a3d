"""How a command's text is split into its name, arguments and body: the one
rule the host and every plugin follow (`wit/command-split-cases.json` holds
the rule and the cases every implementation is tested against).

Leading whitespace, blank lines included, is skipped; the name is the first
line up to its first whitespace character; the arguments are the rest of
that line without leading or trailing whitespace; the body is everything
after the first newline, verbatim (None without one). Whitespace is
Unicode's White_Space set, spelled out because Python's own (`str.split`,
`str.strip`) also counts U+001C to U+001F."""

WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def split_command(text: str) -> tuple[str, str, str | None]:
    """(name, arguments, body) of a command's text."""
    first, newline, body = text.lstrip(WHITESPACE).partition("\n")
    for at, char in enumerate(first):
        if char in WHITESPACE:
            name, arguments = first[:at], first[at + 1:]
            break
    else:
        name, arguments = first, ""
    return name, arguments.strip(WHITESPACE), body if newline else None
