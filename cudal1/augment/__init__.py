"""Stage-1 data augmentation: teacher endpoints (`endpoint`), the collection loop (`collect`) and
the versioned dataset stage 1 reads (`dataset`). Entry point: jobs/augment.py."""
