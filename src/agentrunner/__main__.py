from agentrunner.interfaces.cli import main

main()
