"""Java and libtorch errors as the Python exceptions PyTorch raises."""

_JAVA_TO_PYTHON = (
    ("org.dtorch.polyglot.torch.ArgumentMismatchException", TypeError),
    ("java.lang.IllegalArgumentException", ValueError),
    ("java.lang.IllegalStateException", RuntimeError),
    ("java.lang.UnsupportedOperationException", NotImplementedError),
    ("java.lang.IndexOutOfBoundsException", IndexError),
    ("java.lang.ArithmeticException", ValueError),
    ("org.dtorch.core.device.CudaUnavailableException", RuntimeError),
    ("java.lang.RuntimeException", RuntimeError),
)


def translate(error):
    """The Python exception for a polyglot.ForeignException (a Java exception, or libtorch's through JavaCPP)."""
    message = str(error)
    for java_name, python_type in _JAVA_TO_PYTHON:
        if message.startswith(java_name + ":"):
            text = message[len(java_name) + 1:].strip()
            # libtorch appends where it raised the error, and sometimes a C++ backtrace: not the script's business.
            cut = text.find("\nException raised from")
            if cut >= 0:
                text = text[:cut]
            return python_type(text.strip())
    return RuntimeError(message)
