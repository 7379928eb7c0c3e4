"""Prints what an earlier script may have left behind; a fresh context prints four times False."""
import builtins
import json
import os
import sys

import dtorch

print(hasattr(builtins, "left_by_earlier_script"), hasattr(json, "left_by_earlier_script"),
      hasattr(dtorch, "left_by_earlier_script"), "left_by_earlier_script" in sys.modules,
      "LEFT_BY_EARLIER_SCRIPT" in os.environ)
