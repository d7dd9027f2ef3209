from agentrunner.testing.mock_provider import main

main()
