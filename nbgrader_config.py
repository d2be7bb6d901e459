"""nbgrader configuration for instructors (nbgrader generate_assignment / autograde / generate_feedback).

- Solution regions become a `pass` stub (valid inside @triton.jit, unlike `raise NotImplementedError()`), and
  `// YOUR CODE HERE` inside CUDA C strings: the releases equal the student copies in notebooks/.
- Timeouts fit Triton's CPU interpreter.
- On a grader without a GPU, TRITON_INTERPRET=1 is set here so the kernels that nbgrader starts
  inherit it (helpers also sets it on import).
- Hidden cases live in autograder/cases/, not in the notebooks, so feedback cannot show them;
  feedback shows the score table that check() prints.
- A grade cell deleted from a submission is put back (add_missing_cells), and a grade cell that shows no score
  (check redefined in the notebook) scores 0 instead of nbgrader's full credit for a silent cell (ScoreRequired).
"""
import os
import shutil

from nbgrader.converters import Autograde, GenerateAssignment

from autograder.stubs import STUB, with_course_stubs, with_score_required   # the course package; `make notebooks`

c = get_config()  # noqa: F821 (provided by nbgrader)
c.ClearSolutions.code_stub = {"python": STUB}
# CUDA C strings (lesson 03) get the stub as a C comment, as in notebooks/
c.GenerateAssignment.preprocessors = with_course_stubs(GenerateAssignment.class_traits()["preprocessors"].default())
c.ExecutePreprocessor.timeout = 600
c.Execute.timeout = 600
c.Execute.interrupt_on_timeout = True
c.ClearHiddenTests.enforce_metadata = True
c.OverwriteCells.add_missing_cells = True
c.Autograde.autograde_preprocessors = with_score_required(Autograde.class_traits()["autograde_preprocessors"].default())

if not shutil.which("nvidia-smi") or os.system("nvidia-smi -L >/dev/null 2>&1") != 0:
    os.environ.setdefault("TRITON_INTERPRET", "1")
