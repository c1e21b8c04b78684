# Empty compiler generated dependencies file for torchtpu_rt.
# This may be replaced when dependencies are built.
