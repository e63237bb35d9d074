from kafkawire.cli import main

raise SystemExit(main())
