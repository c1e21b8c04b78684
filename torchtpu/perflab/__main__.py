"""python -m torchtpu.perflab [suite ...] [--quick] [--out DIR] [--compare A.json B.json]"""
import sys

from torchtpu.perflab.runner import main

sys.exit(main())
