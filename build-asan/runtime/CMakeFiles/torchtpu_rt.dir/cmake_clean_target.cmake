file(REMOVE_RECURSE
  "libtorchtpu_rt.a"
)
