from agentrunner.cli import main

main()
