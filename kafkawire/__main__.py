from kafkawire.tools.cli import main

raise SystemExit(main())
