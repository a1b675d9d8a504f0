"""Built-in text games for fast RL: GuessTheNumber, FrozenLake, Sokoban."""
