"""Leaves state wherever a script can: a builtin, an attribute of an imported module, a module, an environment variable."""
import builtins
import json
import os
import sys

import dtorch

builtins.left_by_earlier_script = 1
json.left_by_earlier_script = 2
dtorch.left_by_earlier_script = 3
sys.modules["left_by_earlier_script"] = json
os.environ["LEFT_BY_EARLIER_SCRIPT"] = "4"
print("state left")
