"""What every layer shares (no ROS, no torch): atomic file writes, the versioned model file,
the persistence contract of the learners, the input check, error measures, jittered Cholesky."""
