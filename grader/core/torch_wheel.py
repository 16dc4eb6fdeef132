"""The torch wheel the course is built and measured on, for the installs the grader writes:
the student handout's README, the Gradescope image, the GitHub Classroom workflow."""

TORCH_VERSION = "2.13.0"
# The CPU-only index: none of those installs grades on a GPU, and the default index's wheel
# pulls several GB of CUDA packages.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
