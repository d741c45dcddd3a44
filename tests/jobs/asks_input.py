"""Asks a question on stdin that nobody answers (run with a pipe on stdin that never delivers)."""
print("checkpoint exists", flush=True)
answer = input("Overwrite? [y/N] ")
print(answer)
