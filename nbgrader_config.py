"""nbgrader configuration for instructors (nbgrader generate_assignment / autograde / generate_feedback).

- Solution regions become a `pass` stub (valid inside @triton.jit, unlike `raise NotImplementedError()`), and
  `// YOUR CODE HERE` inside CUDA C strings: the releases equal the student copies in notebooks/.
- Timeouts fit Triton's CPU interpreter.
- On a grader without a GPU, TRITON_INTERPRET=1 is set here so the kernels that nbgrader starts
  inherit it (helpers also sets it on import).
- Hidden cases live in autograder/cases/, not in the notebooks, so feedback cannot show them;
  feedback shows the score table that check() prints.
"""
import os
import shutil

from nbgrader.converters import GenerateAssignment

from autograder.stubs import STUB, with_course_stubs   # the course package; `make notebooks` uses the same stubs

c = get_config()  # noqa: F821 (provided by nbgrader)
c.ClearSolutions.code_stub = {"python": STUB}
# CUDA C strings (lesson 03) get the stub as a C comment, as in notebooks/
c.GenerateAssignment.preprocessors = with_course_stubs(GenerateAssignment.class_traits()["preprocessors"].default())
c.ExecutePreprocessor.timeout = 600
c.Execute.timeout = 600
c.Execute.interrupt_on_timeout = True
c.ClearHiddenTests.enforce_metadata = True

if not shutil.which("nvidia-smi") or os.system("nvidia-smi -L >/dev/null 2>&1") != 0:
    os.environ.setdefault("TRITON_INTERPRET", "1")
