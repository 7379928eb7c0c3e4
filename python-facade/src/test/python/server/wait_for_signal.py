"""Says it started, then sleeps until it is stopped."""
import time

print("started", flush=True)
time.sleep(600)
print("not stopped")
