"""Errors whose message is meant for the user, as one clear sentence."""


class UserError(Exception):
    """Bad input: the message says what is wrong and what to do, in one sentence.

    Front ends print ``str(err)`` as it is (the CLI exits 2); never a traceback.
    """
