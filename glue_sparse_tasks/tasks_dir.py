"""``python -m glue_sparse_tasks.tasks_dir`` prints the task folder for ``--include_path`` users."""

from glue_sparse_tasks import TASKS_DIR

if __name__ == "__main__":
    print(TASKS_DIR)
