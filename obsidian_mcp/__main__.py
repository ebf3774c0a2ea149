from obsidian_mcp.launch import main

main()
